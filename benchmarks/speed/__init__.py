"""Speed benchmarks: steps/s, update cost, overheads and scaling (`python -m benchmarks.speed.<script>`)."""
