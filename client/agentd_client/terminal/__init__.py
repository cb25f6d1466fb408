"""What a person sees and types: the one sanitiser, safe output streams, attach's view
and prompts, raw terminal modes and the links of interactive tasks."""
