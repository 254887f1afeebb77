#include <httplib.h>
#include <netinet/tcp.h>
#include <cstdlib>
static int fd = -1;
int main(int, char** argv) {
  httplib::Server s;
  s.new_task_queue = [] { return new httplib::ThreadPool(64); };
  s.set_socket_options([](socket_t sock) {
    int on = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    fd = sock;
  });
  s.bind_to_port("127.0.0.1", atoi(argv[1]));
  ::listen(fd, SOMAXCONN);
  s.Get(".*", [](const httplib::Request&, httplib::Response& r) {
    r.set_content("{\"ready\":true}", "application/json");
  });
  s.listen_after_bind();
}
