"""Small fake servers for tests: they speak just enough of a wire protocol to record what a
client sends and to answer with what the test chooses (hostile servers, §13)."""
