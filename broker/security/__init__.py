"""Authentication (issue 17 part 1): SCRAM and PLAIN as sans-IO state machines, the broker's TLS
contexts and the principals they yield. No sockets here: ``broker.server.authenticator`` and the
client's connection drive these objects with the bytes they carry."""
