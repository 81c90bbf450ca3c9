"""Model factories that tests introspect through ``package.module:factory`` references."""
