"""A command's process and its output: its launch (plan, then start), the Run and Output
protocols, tasks, runs outside the sandbox, output files."""
