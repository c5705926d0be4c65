"""Signing in to managed Kafka services: what their tokens are made of.

* ``aws``: AWS Signature Version 4 presigning (the standard library's hmac) and the AWS
  credentials chain (botocore, the ``[aws]`` extra), for Amazon MSK's IAM sign-in.
* ``msk``: Amazon MSK's IAM sign-in -- the OAUTHBEARER token and the ``AWS_MSK_IAM`` payload.
* ``google``: Google's Managed Kafka OAUTHBEARER token, from the application default
  credentials (google-auth, the ``[gcp]`` extra).

Nothing here touches the network of Kafka; the SASL mechanisms (``network.sasl``) carry what is
made here.  No secret reaches a repr, a log line or an error.
"""
