# The Sphinx configuration and extensions are not test modules.
collect_ignore = ["conf.py", "_ext"]
