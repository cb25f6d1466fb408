"""What Grep, Glob and BashOutput share: ripgrep in the sandbox, glob order, patterns."""
