"""Code generated from protos/agentd/v1 by `make proto`; do not edit."""
