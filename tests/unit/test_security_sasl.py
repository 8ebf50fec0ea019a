"""SCRAM (RFC 7677's test vector, both sides), PLAIN, JAAS parsing, certificate principals, the
listener security settings, and the SASL gate's phases and re-authentication (KIP-368) through
its real ``handle`` with the network layer's per-connection state."""

from __future__ import annotations

import asyncio
import base64
import contextvars

import pytest

from broker.security.sasl import PlainServer, SaslError, parse_jaas, plain_token
from broker.security.sasl_client import SaslClient
from broker.security.scram import (
    ScramClient, ScramCredential, ScramError, ScramServer, credential_from_password,
)
from broker.security.tls import certificate_principal
from broker.server import network
from broker.server.authenticator import SaslAuthenticator
from broker.server.network import AnswerAndClose, CloseConnection
from broker.server.security_config import security_from_properties
from broker.wire import ApiKey, decode_response, encode_request

SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_rfc7677_vector_client_and_server():
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", lambda: "rOprNGfwEbeRWgbNEkqO")
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert client.final(SERVER_FIRST) == CLIENT_FINAL
    client.verify(SERVER_FINAL)
    server = ScramServer("SCRAM-SHA-256", lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    credential = credential_from_password("SCRAM-SHA-256", "pencil", SALT, 4096)
    assert server.first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", credential) == SERVER_FIRST
    assert server.final(CLIENT_FINAL) == SERVER_FINAL and server.username == "user"
    assert ScramCredential.from_text(credential.to_text()) == credential


@pytest.mark.parametrize("message, credential_known, error", [
    (b"n,,n=user,r=abc", False, "invalid credentials with SASL mechanism SCRAM-SHA-512"),
    (b"p=tls-unique,,n=user,r=abc", True, "Invalid SCRAM client first message"),
    (b"n,,n=us=er,r=abc", True, "bad username encoding"),
    (b"n,,n=user,r=abc,tokenauth=true", True, "delegation tokens"),
])
def test_scram_server_refuses_first_messages(message, credential_known, error):
    credential = credential_from_password("SCRAM-SHA-512", "pw", b"salt" * 4) if credential_known else None
    with pytest.raises(ScramError, match=error):
        ScramServer("SCRAM-SHA-512", lambda: "n").first(message, credential)


def test_scram_wrong_password_and_server_impostor():
    credential = credential_from_password("SCRAM-SHA-512", "right", b"s" * 16)
    server = ScramServer("SCRAM-SHA-512", lambda: "srv")
    client = ScramClient("SCRAM-SHA-512", "bob", "wrong", lambda: "cli")
    final = client.final(server.first(client.first(), credential))
    with pytest.raises(ScramError, match="invalid credentials with SASL mechanism SCRAM-SHA-512"):
        server.final(final)
    honest = ScramClient("SCRAM-SHA-512", "bob", "right", lambda: "cli")
    honest.final(ScramServer("SCRAM-SHA-512", lambda: "srv").first(honest.first(), credential))
    with pytest.raises(ScramError, match="server signature"):
        honest.verify(b"v=" + base64.b64encode(b"x" * 64))


def test_plain_and_jaas():
    jaas = parse_jaas('org.apache.kafka.common.security.plain.PlainLoginModule required '
                      'username="admin" password="a\\"b" user_admin="a\\"b" user_alice="s3";')
    assert (jaas.username, jaas.password) == ("admin", 'a"b') and "s3" not in repr(jaas)
    server = PlainServer.from_jaas(jaas)
    assert server.authenticate(plain_token("alice", "s3")) == "alice"
    for token in (plain_token("alice", "bad"), plain_token("eve", "s3"), b"alice\x00s3", b"x\x00alice\x00s3"):
        with pytest.raises(SaslError, match="Authentication failed|Invalid SASL/PLAIN"):
            server.authenticate(token)


def test_certificate_principal_is_kafkas_rfc2253_dn():
    cert = {"subject": ((("countryName", "US"),), (("organizationName", "pylog, inc"),),
                        (("organizationalUnitName", "eng"),), (("commonName", "alice"),))}
    assert certificate_principal(cert) == "User:CN=alice,OU=eng,O=pylog\\, inc,C=US"
    assert certificate_principal(None) is None and certificate_principal({}) is None


@pytest.mark.parametrize("props, error", [
    ({"listener.security.protocol.map": "EXTERNAL:TLS"}, "NAME:PROTOCOL"),
    ({"sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI not served"),
    ({"inter.broker.listener.name": "NOPE"}, "not one of listeners"),
    ({"listener.security.protocol.map": "PLAINTEXT:SSL"}, "needs ssl.keystore.location"),
    ({"listener.security.protocol.map": "PLAINTEXT:SSL", "ssl.keystore.location": "/k",
      "ssl.keystore.type": "JKS"}, "PEM files only"),
])
def test_listener_security_config_errors_name_the_key(props, error):
    with pytest.raises(ValueError, match=error):
        security_from_properties(props, ["PLAINTEXT"])


def test_listener_security_config_maps_names():
    security, known = security_from_properties({
        "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT,EXTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "internal",
        "listener.name.internal.plain.sasl.jaas.config": 'x required username="a" password="b";',
        "connections.max.reauth.ms": "60000"}, ["INTERNAL", "EXTERNAL"])
    assert security.inter_broker_listener_name == "INTERNAL"
    assert security.listeners["INTERNAL"].uses_sasl and not security.listeners["EXTERNAL"].uses_sasl
    assert security.listeners["INTERNAL"].jaas["PLAIN"].username == "a"
    assert security.connections_max_reauth_ms == 60000 and "listener.name.internal.plain.sasl.jaas.config" in known


# ----------------------------------------------------------------------------- the SASL gate

class _Dispatcher:
    def __init__(self) -> None:
        self.frames = 0

    async def handle(self, frame):
        self.frames += 1
        return [b"served"]


class _Store:
    def __init__(self, credentials) -> None:
        self.credentials = credentials

    async def lookup(self, user, mechanism):
        return self.credentials.get((user, mechanism))


def _gate(now, reauth_ms=0, **props):
    security, _ = security_from_properties({
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.jaas.config": 'x required user_admin="admin-secret" user_bob="bob-secret";', **props},
        ["SASL_PLAINTEXT"])
    store = _Store({("alice", "SCRAM-SHA-256"): credential_from_password("SCRAM-SHA-256", "alice-secret", b"x" * 16)})
    dispatcher = _Dispatcher()
    return SaslAuthenticator(dispatcher, security.listeners["SASL_PLAINTEXT"], store, lambda: now[0], reauth_ms), dispatcher


def _in_connection(coroutine_fn):
    """Run ``coroutine_fn(state)`` as a connection's requests run: in one context whose
    connection_state() is a fresh dict."""
    context = contextvars.copy_context()
    state = {}
    context.run(network._CONNECTION_STATE.set, state)

    async def main():
        return await asyncio.get_running_loop().create_task(coroutine_fn(state), context=context)
    return asyncio.run(main())


def _exchange(gate, client: SaslClient, version: int = 2) -> int:
    correlation = iter(range(1, 100))

    async def request(api_key, api_version, body):
        frame = encode_request(api_key, api_version, next(correlation), "t", body)
        try:
            chunks = await gate.handle(frame)
        except AnswerAndClose as final:
            chunks = final.response
        data = b"".join(bytes(c) for c in chunks)[4:]  # the chunks carry the size prefix
        return decode_response(api_key, api_version, data)[1]
    return client.exchange_async(request, version)


def test_gate_closes_early_requests_and_serves_after_scram():
    now = [0]
    gate, dispatcher = _gate(now)

    async def run(state):
        with pytest.raises(CloseConnection):
            await gate.handle(encode_request(ApiKey.METADATA, 1, 1, "t", {"topics": []}))
        await _exchange(gate, SaslClient("SCRAM-SHA-256", "alice", "alice-secret"))
        assert state["authenticated"] and network.principal() == "User:alice"
        assert await gate.handle(encode_request(ApiKey.METADATA, 1, 9, "t", {"topics": []})) == [b"served"]
    _in_connection(run)
    assert dispatcher.frames == 1


def test_gate_reauthentication_keeps_the_principal_and_expiry_closes():
    now = [0]
    gate, dispatcher = _gate(now, reauth_ms=1000)
    metadata = encode_request(ApiKey.METADATA, 1, 9, "t", {"topics": []})

    async def run(state):
        lifetime = await _exchange(gate, SaslClient("PLAIN", "admin", "admin-secret"))
        assert lifetime == 1000
        now[0] = 900
        assert await _exchange(gate, SaslClient("PLAIN", "admin", "admin-secret")) == 1000  # re-authenticated
        now[0] = 1800  # within the new session
        assert await gate.handle(metadata) == [b"served"]
        from broker.security.sasl_client import SaslAuthenticationError
        with pytest.raises(SaslAuthenticationError, match="error 34"):  # ILLEGAL_SASL_STATE
            await _exchange(gate, SaslClient("SCRAM-SHA-256", "alice", "alice-secret"))  # another mechanism
    _in_connection(run)

    async def other_user(state):
        await _exchange(gate, SaslClient("PLAIN", "admin", "admin-secret"))
        from broker.security.sasl_client import SaslAuthenticationError
        with pytest.raises(SaslAuthenticationError, match="Cannot change principals"):
            await _exchange(gate, SaslClient("PLAIN", "bob", "bob-secret"))
    now[0] = 0
    _in_connection(other_user)

    async def expired(state):
        await _exchange(gate, SaslClient("PLAIN", "admin", "admin-secret"))
        now[0] += 1000
        with pytest.raises(CloseConnection, match="expired"):
            await gate.handle(metadata)
    now[0] = 0
    _in_connection(expired)


def test_gate_session_lifetime_per_mechanism_and_the_counts():
    """``listener.name.<l>.<mechanism>.connections.max.reauth.ms`` (Kafka's prefix) sets one
    mechanism's session lifetime: PLAIN keeps the broker-wide 0 (no expiry) while SCRAM-SHA-256
    sessions last 500 ms; the gate counts (re-)authentications and expired connections killed."""
    now = [0]
    gate, _ = _gate(now, **{"listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms": "500"})
    metadata = encode_request(ApiKey.METADATA, 1, 9, "t", {"topics": []})

    async def scram(state):
        assert await _exchange(gate, SaslClient("SCRAM-SHA-256", "alice", "alice-secret")) == 500
        now[0] = 400
        assert await _exchange(gate, SaslClient("SCRAM-SHA-256", "alice", "alice-secret")) == 500
        now[0] = 900
        with pytest.raises(CloseConnection, match=r"expired \(connections.max.reauth.ms=500\)"):
            await gate.handle(metadata)

    async def plain(state):
        assert await _exchange(gate, SaslClient("PLAIN", "admin", "admin-secret")) == 0
        now[0] = 10**9
        assert await gate.handle(metadata) == [b"served"]
    _in_connection(scram)
    _in_connection(plain)
    with pytest.raises(Exception):
        _in_connection(lambda state: _exchange(gate, SaslClient("PLAIN", "admin", "guess")))
    with pytest.raises(AnswerAndClose):  # an unsupported mechanism is a failed authentication too
        _in_connection(lambda state: gate.handle(encode_request(ApiKey.SASL_HANDSHAKE, 1, 1, "t",
                                                                {"mechanism": "GSSAPI"})))
    assert gate.counts == {"successful-authentication-total": 2, "failed-authentication-total": 2,
                           "successful-reauthentication-total": 1, "failed-reauthentication-total": 0,
                           "expired-connections-killed-count": 1}


def test_gate_handshake_v0_then_raw_scram_tokens():
    """SaslHandshake v0 (before KIP-152): the tokens follow as bare frames, answered bare."""
    now = [0]
    gate, dispatcher = _gate(now)
    from broker.security.scram import ScramClient

    async def run(state):
        answer = await gate.handle(encode_request(ApiKey.SASL_HANDSHAKE, 0, 1, "t", {"mechanism": "SCRAM-SHA-256"}))
        assert decode_response(ApiKey.SASL_HANDSHAKE, 0, b"".join(bytes(c) for c in answer)[4:])[1].error_code == 0
        client = ScramClient("SCRAM-SHA-256", "alice", "alice-secret", lambda: "nonce")
        server_first = await gate.handle(client.first())
        client.verify(await gate.handle(client.final(server_first)))
        assert network.principal() == "User:alice"
        assert await gate.handle(encode_request(ApiKey.METADATA, 1, 9, "t", {"topics": []})) == [b"served"]
    _in_connection(run)


class _ApiVersionsDispatcher:
    """Answers every authenticated request as ApiVersions (what the gate passes on)."""

    def __init__(self) -> None:
        self.frames = 0

    async def handle(self, frame):
        from broker.wire import ApiVersionsResponse, decode_request, encode_response_chunks
        self.frames += 1
        header, _ = decode_request(frame, strict=False)
        return encode_response_chunks(header.api_key, header.api_version, header.correlation_id,
                                      ApiVersionsResponse(error_code=0, api_keys=[]))


def test_inter_broker_connection_reauthenticates_before_its_session_ends():
    """A broker's connection to another broker's SASL listener (a real ``KafkaServer`` with the
    gate, sessions of 1000 ms on a shared fake clock): the request after 85-95 % of the lifetime is
    preceded by a re-authentication on the same socket, so a request after the first session
    would have ended is served, not closed."""
    from broker.server import inter_broker
    from broker.server.network import KafkaServer, NetworkLimits
    now_ms = [0]
    gate, _ = _gate(now_ms, reauth_ms=1000)
    gate._dispatcher = dispatcher = _ApiVersionsDispatcher()
    connections = []

    async def main():
        server = KafkaServer(gate, "127.0.0.1", 0, NetworkLimits(), authentication_required=True)
        await server.start()
        saved = inter_broker._SECURITY
        inter_broker.configure_security(inter_broker.InterBrokerSecurity(
            sasl=lambda: SaslClient("PLAIN", "admin", "admin-secret")))
        connection = inter_broker.InterBrokerConnection("127.0.0.1", server.port, "broker-2", 5.0,
                                                        monotonic_s=lambda: now_ms[0] / 1000)
        try:
            for at_ms in (0, 500, 960, 1500, 1920, 2600):
                now_ms[0] = at_ms
                assert (await connection.request(ApiKey.API_VERSIONS, 0, {})).error_code == 0
                connections.append(id(connection._writer))
        finally:
            inter_broker.configure_security(saved)
            await connection.close()
            await server.close()
    asyncio.run(main())
    assert len(set(connections)) == 1  # one socket throughout
    assert dispatcher.frames == 6
    assert gate.counts["successful-authentication-total"] == 1
    assert gate.counts["successful-reauthentication-total"] == 2  # at 960 and 1920 ms (sessions to 1960, 2920)
    assert gate.counts["expired-connections-killed-count"] == 0


def test_reauthentication_point_is_a_random_85_to_95_percent_of_the_lifetime():
    """Kafka's clients renew a KIP-368 session between 85 % and 95 % of its lifetime (random, so
    connections opened together do not renew together); lifetime 0 means never."""
    from broker.security.sasl_client import reauthentication_delay_ms
    assert reauthentication_delay_ms(0) is None
    assert reauthentication_delay_ms(2000, lambda: 0.0) == pytest.approx(1700)
    assert reauthentication_delay_ms(2000, lambda: 0.999999) == pytest.approx(1900, abs=0.01)
    points = {reauthentication_delay_ms(2000) for _ in range(200)}
    assert all(1700 <= p < 1900 for p in points) and len(points) > 100
