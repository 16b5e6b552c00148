"""JobFlow executors in Python (docs/executors/python.md).

    from jobflow_executor import JobExecutor, JobFlowASGI

    executor = JobExecutor(os.environ["JOBFLOW_SIGNING_SECRET"])

    @executor.handler("syncOrders")
    async def sync_orders(ctx):
        mine = [o for o in await load_order_ids() if ctx.owns_id(o)]
        return f"synced {len(mine)} orders"

    app = JobFlowASGI(executor)          # uvicorn module:app
    app = JobFlowWSGI(executor)          # or gunicorn module:app (Flask, Django)
"""

from .asgi import JobFlowASGI
from .executor import JobExecutor
from .nacos import NacosError, NacosRegistration
from .protocol import DataRange, JobContext, JobResult, Stopped, sign, verify
from .wsgi import JobFlowWSGI

__all__ = ["DataRange", "JobContext", "JobExecutor", "JobFlowASGI", "JobFlowWSGI", "JobResult",
           "NacosError", "NacosRegistration", "Stopped", "sign", "verify"]
