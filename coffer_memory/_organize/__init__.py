"""The LLM organizer: files the inbox into topic documents and rules, reorganizes topics."""
