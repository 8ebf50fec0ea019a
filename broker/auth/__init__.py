"""Authorization (issue 17, part 2): Kafka's ACL model and authorizer.

- ``acl``: the model (resource patterns, access control entries, filters) with Kafka's codes and
  names. Pure.
- ``authorizer``: the decision (deny wins, implied operations, super users,
  ``allow.everyone.if.no.acl.found``) over an immutable index of the ACLs, with a bounded memo so
  the per-request check is a dict lookup. Pure.
- ``zk_store``: ACLs in ZooKeeper where Kafka's ZooKeeper authorizer kept them (``/kafka-acl``,
  ``/kafka-acl-extended/prefixed``, change notifications), and the thin shell that keeps a broker's
  index in step with them. The only module here that does I/O.
"""
