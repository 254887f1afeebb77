#!/usr/bin/env python3
"""Times scrapes of a /metrics endpoint while idle and trickling clients hold connections.

    bench/metrics_idle_connections.py PORT IDLE TRICKLING

Opens IDLE connections that send nothing and TRICKLING ones that send a GET one byte a second,
waits 1.5 s, then times three scrapes (GET /metrics, Connection: close), each given up after
40 s. bench/results/metrics-idle-connections-2026-11-28.md has the runs.
"""
import socket
import sys
import threading
import time


def main():
    port, idle_n, trickle_n = (int(a) for a in sys.argv[1:4])
    socks = []
    for i in range(idle_n + trickle_n):
        s = socket.socket()
        s.settimeout(3)
        try:
            s.connect(("127.0.0.1", port))
        except OSError as e:
            print(f"connection {i} not accepted: {e}")
            break
        socks.append(s)
    tricklers = socks[idle_n:]
    request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
    stop = threading.Event()

    def trickle():
        for i in range(len(request)):
            if stop.is_set():
                return
            for s in tricklers:
                try:
                    s.send(request[i:i + 1])
                except OSError:
                    pass
            stop.wait(1)

    t = threading.Thread(target=trickle)
    t.start()
    time.sleep(1.5)
    for k in range(3):
        start = time.time()
        s = socket.socket()
        s.settimeout(40)
        try:
            s.connect(("127.0.0.1", port))
            s.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            head = s.recv(12)
            while s.recv(65536):
                pass
            print(f"scrape {k}: {time.time() - start:.3f} s {head!r}")
        except OSError as e:
            print(f"scrape {k}: no answer after {time.time() - start:.1f} s ({e})")
        s.close()
    stop.set()
    t.join()
    for s in socks:
        s.close()


if __name__ == "__main__":
    main()
