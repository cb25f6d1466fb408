"""A command's process and its output: tasks, runs outside the sandbox, output files."""
