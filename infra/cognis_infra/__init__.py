"""Pulumi components that deploy cognis-memory on AWS.

One :class:`pulumi.ComponentResource` per concern, each taking a typed dataclass of
arguments and registering its outputs:

========================  ==============================================================
module                    component
========================  ==============================================================
``network``               VPC, subnets over 3 AZs, NAT, VPC endpoints, security groups
``encryption``            the stack's customer-managed KMS key (logs, SNS)
``search``                OpenSearch domain (BM25 index)
``database``              Aurora PostgreSQL Serverless v2 (system of record, pgvector)
``cache``                 ElastiCache Redis replication group
``reranker``              SageMaker endpoint serving a BGE cross-encoder
``registry``              ECR repository for the API image
``service``               ECS Fargate service behind an ALB, IAM, autoscaling
``observability``         SNS topic, alarms and the CloudWatch dashboard
========================  ==============================================================

``config`` turns stack configuration into the dataclasses; ``infra/__main__.py`` wires
the components together.
"""
