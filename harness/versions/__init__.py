"""harness versions: the profile in one environment per combination of
library releases."""
