"""``GET /cluster``: the cluster as this broker's metadata shows it (any broker answers)."""

from __future__ import annotations

from fastapi import APIRouter

from headwater.errors import NotAcceptableError
from headwater_broker.api import models
from headwater_broker.api.deps import BrokerDep, JSONAnswerDep
from headwater_kernel.body import JSONBody

router = APIRouter(
    default_response_class=JSONBody,
    tags=["cluster"],
    dependencies=[JSONAnswerDep],
    responses=models.error_responses(NotAcceptableError),
)


@router.get(
    "/cluster",
    response_model=models.ClusterDescription,
    summary="Cluster id, the controller and its epoch, and every registered broker",
)
async def describe_cluster(broker: BrokerDep) -> models.ClusterDescription:
    image = broker.image
    return models.ClusterDescription(
        cluster_id=image.cluster_id,
        controller=models.ControllerSummary(
            broker_id=image.controller.broker_id, epoch=image.controller.epoch
        ),
        brokers=[
            models.BrokerSummary(broker_id=b.broker_id, url=b.url, rack=b.rack, state=b.state.value)
            for b in sorted(image.brokers.values(), key=lambda b: b.broker_id)
        ],
    )
