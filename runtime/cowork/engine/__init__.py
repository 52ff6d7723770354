"""Docker itself: the client, images, hardened containers, their labels, the reaper, hidden verifiers."""
