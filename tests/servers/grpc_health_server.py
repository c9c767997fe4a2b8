#!/usr/bin/env python3
"""A real gRPC server with the standard health service (grpcio-health-checking), for the
gRPC probe tests.

    grpc_health_server.py [SERVICE=STATUS ...]

Listens on an ephemeral loopback port and prints `PORT <n>` on stdout once serving.
STATUS is SERVING, NOT_SERVING, UNKNOWN or SERVICE_UNKNOWN; the overall service "" is
SERVING unless given (`=NOT_SERVING`). Lines `SERVICE=STATUS` on stdin change a status.
Exits when stdin closes.
"""
import sys
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc


def main():
    servicer = health.HealthServicer()
    statuses = {"": "SERVING"}
    for arg in sys.argv[1:]:
        name, _, status = arg.partition("=")
        statuses[name] = status
    for name, status in statuses.items():
        servicer.set(name, health_pb2.HealthCheckResponse.ServingStatus.Value(status))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"PORT {port}", flush=True)
    for line in sys.stdin:
        name, _, status = line.strip().partition("=")
        if status:
            servicer.set(name, health_pb2.HealthCheckResponse.ServingStatus.Value(status))
            print(f"SET {name}={status}", flush=True)
    server.stop(0)


if __name__ == "__main__":
    main()
