"""harness count: instructions per step, counted by callgrind."""
