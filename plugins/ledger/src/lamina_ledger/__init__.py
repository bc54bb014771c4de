"""Lamina session history from an Agents Ledger."""
