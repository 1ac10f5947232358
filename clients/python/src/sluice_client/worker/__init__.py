"""The worker runtime: `Worker` (threads) and `AsyncWorker` (asyncio) over any queue."""
