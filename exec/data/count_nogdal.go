//go:build !cgo

package data

import "pipe/lang"

func countTiles(b *lang.Block, c *config) (int, error) { return 0, errNoGDAL }

func rasterResident(b *lang.Block, c *config) (Resident, error) { return Resident{}, errNoGDAL }
