"""One module per content rule; ``releasekit.plan.content.registry`` lists them."""
