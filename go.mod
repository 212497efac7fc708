module github.com/sluice-rl/sluice

go 1.26.0

require github.com/redis/rueidis v1.0.80

require golang.org/x/sys v0.50.0 // indirect
