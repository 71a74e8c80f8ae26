// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file http.hpp
/// The operator console (target dlq::http, needs cpp-httplib): dlq::http::Console mounts a
/// JSON API and a one-page web UI onto an httplib::Server; dlq::http::QueueBackend adapts a
/// dlq::DeadLetterQueue to it; dlq::http::GuardedServer is the httplib::Server to serve it on
/// (limits for slow and greedy clients). See dlq/http/console.hpp and docs/console.md.
#pragma once

#include <dlq/http/backend.hpp>
#include <dlq/http/console.hpp>
#include <dlq/http/page.hpp>
#include <dlq/http/search.hpp>
#include <dlq/http/server.hpp>
