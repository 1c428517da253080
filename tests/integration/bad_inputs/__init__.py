"""Bad-input suite: every malformed input is one line on stderr, exit code 2, nothing earlier touched."""
