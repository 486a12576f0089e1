"""Security shared by the services: principals, Kafka's ACL model, password and token checks.

Framework-free: the services' middleware turns requests into principals with these and asks the
authorizer; storage of users and ACLs is the cluster metadata's.
"""
