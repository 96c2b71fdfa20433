"""The inbox: acknowledged vendor deliveries and the consumers that run their turns."""
