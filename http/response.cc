// SerializeResponse (http/connection_loop.h): the bytes of an answer, for the loop's refusals and
// the workers' answers alike.
#include <string_view>

#include "fmt/format.h"
#include "http/connection_loop.h"

namespace neuron {
namespace {

std::string_view Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 413:
      return "Content Too Large";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Status";
  }
}

}  // namespace

std::string SerializeResponse(const HttpResponse& r, bool head, bool keep_alive) {
  std::string out = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
                                r.status, Reason(r.status), r.content_type, r.body.size());
  for (const auto& [k, v] : r.headers) out += fmt::format("{}: {}\r\n", k, v);
  out += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  if (!head) out += r.body;
  return out;
}

}  // namespace neuron
