"""Score benchmarks: returns, time to a score, robustness, and the tools that archive runs (`python -m benchmarks.scores.<script>`)."""
