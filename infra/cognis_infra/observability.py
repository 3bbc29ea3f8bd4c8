"""Observability: SNS topic, alarms and one CloudWatch dashboard.

Application metrics come from the API's CloudWatch Embedded Metric Format log lines.
Their names and dimensions come from ``cognis_infra.metric_names``, a link to the module the
runtime emits them with (``cognis_memory/telemetry/names.py``), so the two sides cannot drift apart:

* ``RetrievalLatency`` / ``IngestLatency`` {service} - alarms on p95 and p99
  (extended statistics), dashboard p50/p95/p99;
* ``StageLatency`` {service, Pipeline, Stage} - per-stage p95 on the dashboard (retrieval stages
  found by a ``SEARCH`` expression: the runtime's stage registry names them, no list here);
* ``Requests`` / ``Errors`` / ``DegradedAnswers`` {service, Operation};
* ``JobsDeadLettered`` {service} - alarm on any dead-lettered ingest job;
* ``OutboxBacklog`` / ``OutboxOldestAgeSeconds`` {service} - the dual store's writes still to push to
  OpenSearch, reported once a minute by each task; alarm when the oldest is older than
  ``cognis:outboxOldestAgeSeconds`` (300 s) in 3 of 5 minutes, dashboard shows both;
* ``Ready`` {service} - written by each task's readiness probe (``GET /ready``: 1 or 0);
  alarm when any task is not ready for 3 of 5 minutes, dashboard shows the ready share.

Infrastructure alarms: ALB 5xx rate (metric math), unhealthy targets (liveness), healthy
targets and running tasks below the service minimum, OpenSearch CPU, JVM memory pressure and
red cluster status, Aurora capacity near its maximum ACU, the reranker endpoint's p95 model
latency and 5xx errors.

Every alarm says what missing data means (``treat_missing_data``): health alarms breach (no
data from a health metric means nothing is running or reporting), load and error alarms do
not (no traffic is not a fault). Percentile alarms ignore periods with too few samples to
compute the percentile (``evaluate_low_sample_count_percentiles = ignore``).

The component creates the topic and wires the parts: the alarms by what they watch
(:mod:`.alarms`), the dashboard's body (:mod:`.dashboard`), its settings and arguments
(:mod:`.observability_args`).
"""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

from .alarms import AlarmMaker, api_alarms, opensearch_alarms, reranker_alarms, store_capacity_alarms
from .base import CognisComponent
from .dashboard import DashboardInputs, dashboard_body, dashboard_url
from .observability_args import ObservabilityArgs, ObservabilitySettings

__all__ = ["Observability", "ObservabilityArgs", "ObservabilitySettings"]


class Observability(CognisComponent):
    """SNS alarm topic (KMS-encrypted), CloudWatch alarms and the dashboard."""

    topic_arn: pulumi.Output[str]
    dashboard_name: str
    dashboard_url: str
    alarm_names: list[str]

    def __init__(self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("cognis:observability:Observability", name, args.tags, opts)
        s = args.settings
        ctx = args.context
        p = args.prefix

        topic = aws.sns.Topic(
            f"{name}-alarms",
            display_name=f"{p} alarms",
            kms_master_key_id=args.kms_key_id,
            tags=self.tags(f"{name}-alarms"),
            opts=self.child_opts(),
        )
        aws.sns.TopicPolicy(
            f"{name}-alarms",
            arn=topic.arn,
            policy=pulumi.Output.json_dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Sid": "CloudWatchAlarms",
                            "Effect": "Allow",
                            "Principal": {"Service": ctx.service_principal("cloudwatch")},
                            "Action": "sns:Publish",
                            "Resource": topic.arn,
                            "Condition": {"StringEquals": {"aws:SourceAccount": ctx.account_id}},
                        },
                        {
                            "Sid": "TlsOnly",
                            "Effect": "Deny",
                            "Principal": "*",
                            "Action": "sns:Publish",
                            "Resource": topic.arn,
                            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                        },
                    ],
                }
            ),
            opts=self.child_opts(),
        )
        if s.alarm_email:
            aws.sns.TopicSubscription(
                f"{name}-email", topic=topic.arn, protocol="email", endpoint=s.alarm_email, opts=self.child_opts()
            )
        else:
            pulumi.log.warn("cognis:alarmEmail is not set: the alarm topic has no subscriber, alarms reach nobody")

        alarm = AlarmMaker(self, name, p, topic.arn)
        for make in (api_alarms, opensearch_alarms, store_capacity_alarms, reranker_alarms):
            make(alarm, args)
        alarms = alarm.alarms

        dashboard_name = p
        inputs = pulumi.Output.all(
            alb=args.alb_arn_suffix,
            target_group=args.target_group_arn_suffix,
            db_cluster=args.db_cluster_identifier,
            redis_group=args.redis_replication_group_id,
            ecs_cluster=args.ecs_cluster_name,
            ecs_service=args.ecs_service_name,
            reranker_endpoint=args.reranker_endpoint_name,
            alarm_arns=[a.arn for a in alarms.values()],
        )
        body = inputs.apply(
            lambda v: json.dumps(
                dashboard_body(
                    DashboardInputs(
                        region=ctx.region,
                        account_id=ctx.account_id,
                        namespace=args.metrics_namespace,
                        service=args.service_name,
                        opensearch_domain=args.opensearch_domain_name,
                        db_max_acu=args.db_max_acu,
                        reranker_variant=args.reranker_variant,
                        retrieval_p95_ms=s.retrieval_p95_ms,
                        outbox_oldest_age_s=s.outbox_oldest_age_s,
                        **v,
                    )
                )
            )
        )
        aws.cloudwatch.Dashboard(
            f"{name}-dashboard", dashboard_name=dashboard_name, dashboard_body=body, opts=self.child_opts()
        )

        self.topic_arn = topic.arn
        self.dashboard_name = dashboard_name
        self.dashboard_url = dashboard_url(ctx.region, dashboard_name)
        self.alarm_names = [f"{p}-{key}" for key in alarms]
        self.register_outputs(
            {
                "topicArn": self.topic_arn,
                "dashboardName": dashboard_name,
                "dashboardUrl": self.dashboard_url,
                "alarmNames": self.alarm_names,
            }
        )
