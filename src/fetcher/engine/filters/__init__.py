"""The filter language (contract §3.4): parsed once into an AST, rendered per dialect."""
