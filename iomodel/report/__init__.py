"""What the user reads: worksheets (Markdown/JSON/CSV), plots and Markdown renderers."""
