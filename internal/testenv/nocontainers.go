//go:build !testcontainers

package testenv

import (
	"errors"

	"github.com/go-sql-driver/mysql"
)

// errNoContainers is the fallback of a build without testcontainers-go.
var errNoContainers = errors.New("testenv: no container fallback in this build (go test -tags testcontainers, with a Docker engine, starts MySQL and Redis in containers)")

func mysqlContainer() (*mysql.Config, error) { return nil, errNoContainers }

func redisContainer() (string, error) { return "", errNoContainers }
