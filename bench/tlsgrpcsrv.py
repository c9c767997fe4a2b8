#!/usr/bin/env python3
"""Listeners for the mixed probe workload of bench/bench.py: HTTPS and gRPC health.

    tlsgrpcsrv.py N_HTTPS N_GRPC CERT KEY

Listens on N_HTTPS ephemeral loopback ports with TLS (CERT/KEY, PEM), answering any request
"200 OK" and closing, and serves grpc.health.v1.Health (SERVING) from one grpcio server on
N_GRPC more ports. Prints {"https": [...], "grpc": [...]} as one JSON line, serves until
SIGTERM. The timing comes from bench/probesrv.c's SYN stamps, not from here.
"""
import asyncio
import json
import signal
import ssl
import sys
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

RESP = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"


async def answer(reader, writer):
    try:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(RESP)
        await writer.drain()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ssl.SSLError):
        pass
    finally:
        writer.close()


async def main():
    n_https, n_grpc, cert, key = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    servers = [await asyncio.start_server(answer, "127.0.0.1", 0, ssl=ctx, backlog=128)
               for _ in range(n_https)]
    https = [s.sockets[0].getsockname()[1] for s in servers]
    rpc = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    servicer = health.HealthServicer()
    servicer.set("", health_pb2.HealthCheckResponse.ServingStatus.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, rpc)
    grpc_ports = [rpc.add_insecure_port("127.0.0.1:0") for _ in range(n_grpc)]
    rpc.start()
    print(json.dumps({"https": https, "grpc": grpc_ports}), flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    rpc.stop(0)


if __name__ == "__main__":
    asyncio.run(main())
