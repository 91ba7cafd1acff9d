"""Reading configuration files: the one YAML loader every study, space and GPU file goes through."""
