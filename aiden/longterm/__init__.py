"""Long-term (cross-session) memory: session summaries and the PROJECT MEMORY block, saved
memories and the profile, history, AutoCompact and Dream.
"""
