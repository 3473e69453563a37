"""Who may do what: API keys, session tokens, principals and the topic rules."""
