// A bare prometheus-cpp (civetweb) exposer for bench/metrics_idle_connections.py, with a chosen
// thread count: g++ -O1 -std=c++17 bench/metrics_civetweb_exposer.cc -o civ
//   -lprometheus-cpp-pull -lprometheus-cpp-core && ./civ 127.0.0.1:PORT THREADS
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
int main(int argc, char** argv) {
  prometheus::Exposer e(
      {"listening_ports", argv[1], "num_threads", argv[2], "request_timeout_ms", "5000"});
  auto r = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter().Name("x_total").Help("x").Register(*r).Add({}).Increment();
  e.RegisterCollectable(r);
  std::printf("ready\n");
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::seconds(120));
}
