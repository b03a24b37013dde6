"""Executors: one module per executor. Importing this package registers the built-in ones."""
