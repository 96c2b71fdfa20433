"""Media sent in chats (issue 44): downloads, speech, images and documents made into a turn."""
