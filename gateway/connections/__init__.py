"""Channel connections: bots and numbers an operator adds at run time, each bound to an agent."""
