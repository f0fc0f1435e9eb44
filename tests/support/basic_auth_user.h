#pragma once
// The basic-auth user the HTTP tests configure: alice, password "secret", stored as a bcrypt hash
// of cost 4 (made with crypt_gensalt("$2y$", 4) + crypt(); the lowest cost keeps each check about
// a millisecond), and the Authorization headers a client sends with the right and a wrong
// password ("alice:secret" and "alice:wrong" in base64). Constants only.

namespace neuron::testing::alice {

inline constexpr char kHash[] = "$2y$04$0MZNcw7rSjThVvRjPTEvsO5As0foLqF9P7R9wYReVIyGqQLtCzICq";
inline constexpr char kPassword[] = "secret";
inline constexpr char kGoodAuth[] = "Authorization: Basic YWxpY2U6c2VjcmV0\r\n";
inline constexpr char kWrongAuth[] = "Authorization: Basic YWxpY2U6d3Jvbmc=\r\n";

}  // namespace neuron::testing::alice
