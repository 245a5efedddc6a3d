"""The Manager's routers: connections, jobs, the event feed and the operational routes."""
