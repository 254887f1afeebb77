#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <cstdlib>
static void Handle(evhttp_request* req, void*) {
  evbuffer* out = evbuffer_new();
  evbuffer_add(out, "{\"ready\":true}", 14);
  evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
  evhttp_send_reply(req, 200, "OK", out);
  evbuffer_free(out);
}
int main(int, char** argv) {
  event_base* base = event_base_new();
  evhttp* http = evhttp_new(base);
  evhttp_set_gencb(http, Handle, nullptr);
  evhttp_bind_socket(http, "127.0.0.1", atoi(argv[1]));
  event_base_dispatch(base);
}
