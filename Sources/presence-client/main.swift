// presence-client: the companion CLI (issue 4). Not built yet.
print("presence-client is not available yet")
