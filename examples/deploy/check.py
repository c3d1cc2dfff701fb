"""The site's health check: the deploy script runs it after writing a release (no shell)."""
import sys

settings = dict(line.split(" = ") for line in open("site/config.txt").read().splitlines())
if int(settings["workers"]) < 1:
    print("unhealthy: workers must be at least 1, got", settings["workers"])
    sys.exit(1)
print("healthy: version", settings["version"])
